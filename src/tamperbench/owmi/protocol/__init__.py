"""What every OWMI layer reads: the stored record's shape and the probe battery (texts, parsing, schema)."""
