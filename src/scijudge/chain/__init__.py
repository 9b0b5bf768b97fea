"""The structured-output fallback chain every judge call goes through: strict schema, strategies, fault classes,
the validated-answer cache, reply sniffing and input fencing."""
