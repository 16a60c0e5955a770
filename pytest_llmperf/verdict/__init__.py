"""A Result against a reference -> a Status: gate rules, judge, baselines, A/B."""
