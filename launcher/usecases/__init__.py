"""What each command does, below the command line: one module per command, each a function
that takes a frozen, keyword-only request and returns a result, its progress, notes and
warnings told through an `on_event` callback (events.py). launcher/cli/ only turns flags into
a request and a result into text or JSON; nothing here prints."""
