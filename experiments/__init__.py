"""Studies: grids of ``train`` runs under a fair protocol, and their pages.

``python -m experiments --study=NAME`` (see ``__main__``). The pipeline, a
module a stage: ``study`` (what a study declares; ``study_files`` finds
study files by path) -> ``plan`` (the runs) -> ``runner`` (``train``
processes, read through ``train.contract``) -> ``ledger`` (the committed
record of finished runs) -> ``results`` and ``protocol`` (results read back,
selection on validation, paired tests) -> ``summary`` and ``figures``.
"""
