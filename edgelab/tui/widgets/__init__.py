"""One widget per file; widgets talk to screens through the messages in edgelab.tui.messages."""
