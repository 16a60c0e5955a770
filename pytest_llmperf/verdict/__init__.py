"""A Result against a reference -> a Status: gate rules and noise bands, the judge, baseline
files and the stale-baseline check, paired A/B, and the measurement record every writer reads.

May import engines/, client/, metrics/ and the layers below them; no I/O beyond baseline files.
"""
