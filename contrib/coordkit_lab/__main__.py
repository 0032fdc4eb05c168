"""``python -m coordkit_lab ARGS`` = ``coordkit lab ARGS``; also the script ``spark-submit`` runs
(see :mod:`coordkit_lab.spark`)."""

from __future__ import annotations

import sys

from coordkit.cli import main

if __name__ == "__main__":
    main(["lab", *sys.argv[1:]])
