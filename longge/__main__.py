from longge.cli import main

raise SystemExit(main())
