"""The agentstores contract suite."""
