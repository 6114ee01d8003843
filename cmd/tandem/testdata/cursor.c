/* A MariaDB Connector/C client that reads through a server-side cursor:
 * COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY, then COM_STMT_FETCH of
 * PREFETCH rows at a time (MaxScale's MXS-5059 is this case). It prints
 * every row it fetched, one per line, and "done" at the end.
 *
 *   cursor HOST PORT DB PREFETCH
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mysql.h>

static void die(MYSQL *m, MYSQL_STMT *st, const char *what) {
	fprintf(stderr, "%s: %s\n", what, st ? mysql_stmt_error(st) : mysql_error(m));
	exit(1);
}

/* run executes sql with one integer parameter through a read-only cursor
 * and fetches at most limit rows (0: all), then closes the statement. */
static void run(MYSQL *m, const char *sql, int param, unsigned long prefetch, int limit) {
	MYSQL_STMT *st = mysql_stmt_init(m);
	if (!st || mysql_stmt_prepare(st, sql, strlen(sql)))
		die(m, st, "prepare");
	unsigned long cursor = CURSOR_TYPE_READ_ONLY;
	if (mysql_stmt_attr_set(st, STMT_ATTR_CURSOR_TYPE, &cursor) ||
	    mysql_stmt_attr_set(st, STMT_ATTR_PREFETCH_ROWS, &prefetch))
		die(m, st, "attr");
	MYSQL_BIND in;
	memset(&in, 0, sizeof in);
	in.buffer_type = MYSQL_TYPE_LONG;
	in.buffer = &param;
	if (mysql_stmt_bind_param(st, &in) || mysql_stmt_execute(st))
		die(m, st, "execute");
	int id = 0;
	char v[64];
	unsigned long vlen = 0;
	MYSQL_BIND out[2];
	memset(out, 0, sizeof out);
	out[0].buffer_type = MYSQL_TYPE_LONG;
	out[0].buffer = &id;
	out[1].buffer_type = MYSQL_TYPE_STRING;
	out[1].buffer = v;
	out[1].buffer_length = sizeof v - 1;
	out[1].length = &vlen;
	if (mysql_stmt_bind_result(st, out))
		die(m, st, "bind result");
	int n = 0, rc;
	while ((limit == 0 || n < limit) && (rc = mysql_stmt_fetch(st)) == 0) {
		v[vlen] = 0;
		printf("%d %s\n", id, v);
		n++;
	}
	if (limit == 0 && rc != MYSQL_NO_DATA)
		die(m, st, "fetch");
	if (mysql_stmt_close(st))
		die(m, NULL, "close");
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: cursor HOST PORT DB PREFETCH\n");
		return 2;
	}
	MYSQL *m = mysql_init(NULL);
	my_bool off = 0;
	mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &off);
	if (!mysql_real_connect(m, argv[1], "root", NULL, argv[3], atoi(argv[2]), NULL, 0))
		die(m, NULL, "connect");
	unsigned long prefetch = strtoul(argv[4], NULL, 10);
	/* Every row, PREFETCH at a time. */
	run(m, "SELECT id, v FROM t WHERE id > ? ORDER BY id", 0, prefetch, 0);
	/* The first rows only: the cursor is closed with rows left. */
	run(m, "SELECT id, v FROM t WHERE id > ? ORDER BY id", 2, prefetch, 3);
	printf("done\n");
	mysql_close(m);
	return 0;
}
