"""A backend skeleton (``template://``): every store method raises ``NotImplementedError``
naming the rule it must keep. Copy the distribution to start a new adapter."""
