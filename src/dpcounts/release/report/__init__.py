"""The steward's private report of a release, written into its private folder.

* :mod:`.summary`: the synthetic totals against the original ones (``summary.md``, a
  county map), and the checks of the options that shape it;
* :mod:`.utility`: what the sets kept, against synthesis with no privacy (``utility.md``,
  ``.csv``, ``.png``);
* :mod:`.promise`: with ``--study``, whether the release keeps what the study's guide
  promised at its epsilon, and what suppression would have kept.

Nothing here is published: every figure and number depends on the confidential counts.
"""
