"""The ``workbench`` command line: parses arguments and calls the library, nothing more."""
