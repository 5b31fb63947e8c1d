"""Math word problems (GSM8K style) as a Gymnasium env and REINFORCE with a KL to a refreshed reference model (in progress)."""
