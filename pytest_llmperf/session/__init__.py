"""What one pytest session holds and does: measure, A/B runs, baseline updates, outputs."""
