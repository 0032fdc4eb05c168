"""Helpers every layer uses: clocks (:mod:`.clock`), CPU timing (:mod:`.cputime`), untrusted
JSON and numbers parsed by one set of rules (:mod:`.jsontext`, :mod:`.numbers`), and text made
safe for a terminal (:mod:`.terminal`)."""
