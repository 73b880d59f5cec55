"""Building the context an agent sees: summaries, keyphrases, packets."""
