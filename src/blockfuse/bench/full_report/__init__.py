"""``blockfuse report``, one job a module: ``command`` (the command line and the run of the parts), ``parts``
(the four part-runners), ``markdown`` (report.md and report.json), ``verdict`` (which provider to use on this
card, from the measured numbers)."""
