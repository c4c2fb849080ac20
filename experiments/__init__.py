"""Studies: grids of ``train`` runs under a fair protocol, and their tables.

``python -m experiments --study=NAME`` (see ``__main__``); the protocol's
arithmetic is ``protocol``, the runs ``study`` and ``runner``, the tables
and figures ``summary`` and ``figures``.
"""
