"""The adbd wire protocol, as the real Debian adb server (29) and adbutils (2.12) use it.

Transport (`wire`, `connection`, `stream`): 24-byte headers (six LE uint32), CNXN (version
0x01000001, maxdata 256 KiB, checksums 0), AUTH only for the `unauthorized` fault,
OPEN/OKAY/WRTE/CLSE streams with one WRTE in flight per direction per stream. Services
(`services`): `shell:`, `shell,v2,...:` and `exec:` (`shell`), `sync:` (`sync`); anything
else is refused with CLSE. `server.AdbdServer` listens and accepts.

adbd reaches its device only through `contract.AdbdDevice`; the device imports adbd, never
the other way round.
"""
