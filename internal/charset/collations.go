package charset

// collations maps a handshake's collation id (below 256) to its character
// set, for the sets this package knows; read from MariaDB 10.11's
// information_schema.COLLATIONS (a test checks it against a server).
var collations = map[byte]string{
	1: "big5", 2: "latin2", 4: "cp850", 5: "latin1", 7: "koi8r", 8: "latin1",
	9: "latin2", 11: "ascii", 12: "ujis", 13: "sjis", 14: "cp1251", 15: "latin1",
	16: "hebrew", 19: "euckr", 20: "latin7", 21: "latin2", 22: "koi8u", 23: "cp1251",
	24: "gb2312", 25: "greek", 26: "cp1250", 27: "latin2", 28: "gbk", 29: "cp1257",
	30: "latin5", 31: "latin1", 33: "utf8mb3", 34: "cp1250", 36: "cp866", 39: "macroman",
	41: "latin7", 42: "latin7", 44: "cp1250", 45: "utf8mb4", 46: "utf8mb4", 47: "latin1",
	48: "latin1", 49: "latin1", 50: "cp1251", 51: "cp1251", 52: "cp1251", 53: "macroman",
	57: "cp1256", 58: "cp1257", 59: "cp1257", 63: "binary", 65: "ascii", 66: "cp1250",
	67: "cp1256", 68: "cp866", 70: "greek", 71: "hebrew", 74: "koi8r", 75: "koi8u",
	77: "latin2", 78: "latin5", 79: "latin7", 80: "cp850", 83: "utf8mb3", 84: "big5",
	85: "euckr", 86: "gb2312", 87: "gbk", 88: "sjis", 91: "ujis", 94: "latin1",
	95: "cp932", 96: "cp932", 97: "eucjpms", 98: "eucjpms", 99: "cp1250", 192: "utf8mb3",
	193: "utf8mb3", 194: "utf8mb3", 195: "utf8mb3", 196: "utf8mb3", 197: "utf8mb3", 198: "utf8mb3",
	199: "utf8mb3", 200: "utf8mb3", 201: "utf8mb3", 202: "utf8mb3", 203: "utf8mb3", 204: "utf8mb3",
	205: "utf8mb3", 206: "utf8mb3", 207: "utf8mb3", 208: "utf8mb3", 209: "utf8mb3", 210: "utf8mb3",
	211: "utf8mb3", 212: "utf8mb3", 213: "utf8mb3", 214: "utf8mb3", 215: "utf8mb3", 223: "utf8mb3",
	224: "utf8mb4", 225: "utf8mb4", 226: "utf8mb4", 227: "utf8mb4", 228: "utf8mb4", 229: "utf8mb4",
	230: "utf8mb4", 231: "utf8mb4", 232: "utf8mb4", 233: "utf8mb4", 234: "utf8mb4", 235: "utf8mb4",
	236: "utf8mb4", 237: "utf8mb4", 238: "utf8mb4", 239: "utf8mb4", 240: "utf8mb4", 241: "utf8mb4",
	242: "utf8mb4", 243: "utf8mb4", 244: "utf8mb4", 245: "utf8mb4", 246: "utf8mb4", 247: "utf8mb4",
}
