"""Playback: a scenario's models stepped into Frames (session, runners, toy memory), and
frames written to and read back from trace files (no torch needed to replay)."""
