"""The faces: the CLI, the HTTP and MCP server, the client, the notebook views. Each is
built from the verb table and adds only its medium's own.
"""
