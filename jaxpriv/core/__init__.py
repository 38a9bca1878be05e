"""The mathematics: mechanisms, divergences, every notion's exact float64/float32 evaluation,
database layouts, closed-form envelopes, retractions and families of mechanisms. Imports nothing
else of jaxpriv."""
