from duorl.cli import main

raise SystemExit(main())
