"""Playback: a scenario's models stepped into Frames (session, runners, toy memory; the
fields a frame holds and the typed records they read back as in observe), and
frames written to and read back from trace files (no torch needed to replay)."""
