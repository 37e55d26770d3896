"""``python -m dragoman`` -> ``dragoman.cli.main()``."""

from dragoman.cli import main

raise SystemExit(main())
