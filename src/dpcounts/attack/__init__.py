"""What an attacker learns of the confidential counts from a release: the feasible range of
each cell a suppressed table hides, given the margins published beside it
(:mod:`~dpcounts.attack.differencing`), and the guesses of the small counts from DP
synthetic sets or the public prior alone (:mod:`~dpcounts.attack.guesses`)."""
