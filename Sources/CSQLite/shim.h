#ifndef CLOUDSYNC_CSQLITE_SHIM_H
#define CLOUDSYNC_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro cast of -1 to a function pointer, which Swift cannot import.
// These wrappers bind with it so SQLite copies the bytes before the Swift buffer goes away.
static inline int cloudsync_sqlite3_bind_text_copy(sqlite3_stmt *statement, int index, const char *text, int byteCount) {
    if (text == 0) {
        // An empty Swift string may have no storage; it must still bind as empty text, not NULL.
        return sqlite3_bind_text(statement, index, "", 0, SQLITE_STATIC);
    }
    return sqlite3_bind_text(statement, index, text, byteCount, SQLITE_TRANSIENT);
}

// Binds without a copy: the caller keeps the bytes alive until the statement has run and the parameter is rebound.
static inline int cloudsync_sqlite3_bind_text_static(sqlite3_stmt *statement, int index, const char *text, int byteCount) {
    if (text == 0) {
        return sqlite3_bind_text(statement, index, "", 0, SQLITE_STATIC);
    }
    return sqlite3_bind_text(statement, index, text, byteCount, SQLITE_STATIC);
}

static inline int cloudsync_sqlite3_bind_blob_copy(sqlite3_stmt *statement, int index, const void *bytes, int byteCount) {
    return sqlite3_bind_blob(statement, index, bytes, byteCount, SQLITE_TRANSIENT);
}

// sqlite3_db_config is variadic, which Swift cannot call.
// Makes closing the connection leave the write-ahead log as it is: no checkpoint into the database, no removal.
static inline int cloudsync_sqlite3_no_checkpoint_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}

#endif
