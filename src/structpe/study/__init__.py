"""Replication studies: a YAML spec of recipes x seeds x evaluations (``spec``), its data stage
(``data``), run resumably cell by cell (``runner``), aggregated into mean ± sd, paired differences
and a verdict per paper claim (``aggregate``, ``report``); ``structpe study`` (``commands``)."""
