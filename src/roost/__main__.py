from roost.cli import main

raise SystemExit(main())
