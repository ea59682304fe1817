"""The paramiko route to an SSH device: authentication, one hop's connection, the pool and its
jump-host streams, command channels, SFTP transfers (see ``edgelab.transport.ssh``)."""
