"""stub"""
MODEL_TYPE = "kimi_linear"
