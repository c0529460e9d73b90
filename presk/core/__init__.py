"""PSK-Core: the typed intermediate representation, its text form and its checks."""
