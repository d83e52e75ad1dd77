"""`python -m lineage`: the `lineage` command."""
import sys

from lineage.cli.main import main

sys.exit(main())
