from duorl.cli.main import main

raise SystemExit(main())
