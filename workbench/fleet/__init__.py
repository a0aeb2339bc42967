"""The fleet: many workers (one per GPU, on any number of hosts) on one shared study in
PostgreSQL (:mod:`.study`), with its claims, heartbeat, outage handling and status."""
