"""What a kernel compiles to, without a GPU: the compile sweep and its records (:mod:`.sweep`),
the emitted PTX/SASS/CUBIN files (:mod:`.artifacts`) and the diff of two binaries (:mod:`.diff`)."""
