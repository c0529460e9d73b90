"""Syntax: the lexer (Unicode and ASCII spellings), the AST and the parser."""
