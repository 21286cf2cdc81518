"""``toolhost.deerflow.sandbox.tools``: DeerFlow's ``deerflow.sandbox.tools`` run by toolhost."""
