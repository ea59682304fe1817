"""``python -m edgelab.deploy.follow RUN``: one detached follower (see :mod:`.process`)."""

from edgelab.deploy.follow.process import main

raise SystemExit(main())
