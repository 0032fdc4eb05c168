"""The strategy contracts plugins implement: assignors (:mod:`.assignment`, their JSON input and
output in :mod:`.assignment_io`), elections (:mod:`.elections`), partitioners
(:mod:`.partitioning`), replica placements (:mod:`.placement`) and offset storage
(:mod:`.offsets`)."""
