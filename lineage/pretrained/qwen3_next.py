"""stub"""
MODEL_TYPE = "qwen3_next"
