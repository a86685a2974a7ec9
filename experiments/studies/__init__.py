"""Studies: populations declared as arms, trained or read from records, and their tables.

A study file (``configs/studies/NAME.py``) declares with ``get_study()`` the
arms (config file, overrides, seeds) and the report that turns their runs into
tables and claims; ``python -m experiments.study --study=FILE --out=DIR`` trains
what is missing (each arm one ``python -m experiments.main`` population), reads
every finished run through one reader, and writes the tables.

- ``records``: the one reader of a run's files (config, results, metrics), which
  refuses in one line what would be a silently wrong table, and the rule that
  keeps a finished run's records in a tracked folder.
- ``tables``: numbers as the tables print them, spreads over seeds, differences
  paired by seed, the table files.
- ``launch``: how an arm's population is started, resumed or read from records.
- ``runner``: the ``Study`` and ``Arm`` declarations, running, reporting, SLURM arrays.
"""
