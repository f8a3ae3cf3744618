"""``python -m marl.kernels`` builds the compiled kernels (``make kernels``)."""

from marl.kernels import main

raise SystemExit(main())
