"""Read models: what a screen or a CLI view shows, computed once from the database (no UI imports).

Each module here answers one question a person asks of the lab (how is this run going, what
does the fleet look like, what does this device offer, where does the matrix stand) as plain
values. ``edgelab/cli`` and ``edgelab/tui`` only render them, so the two can never disagree
about a figure: they call the same code.
"""
