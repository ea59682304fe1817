"""The system OpenSSH client's route to an SSH device, held to edgelab's own trust: its pinned
config and known_hosts, bulk uploads beside a paramiko connection, and a one-login request loop
(see ``edgelab.transport.ssh``). Nothing here imports paramiko at import time except ``bulk``."""
