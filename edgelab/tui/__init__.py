"""The Textual dashboard (`edgelab tui`). UI only: it reads the domain layer, never the reverse."""
