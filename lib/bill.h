/* bill.h: the human bill of a receipt. Token counts per call and in total,
 * and money as what it is: an estimated list-price subtotal from the
 * catalog. Unpriced calls and unavailable usage are flagged loudly. */
#ifndef CAVE_BILL_H
#define CAVE_BILL_H

#include <jv.h>

#include "buf.h"

/* Appends the bill of receipt (borrowed, a contract receipt object) to out
 * as plain text lines. unknown_calls counts calls whose outcome the events
 * never told (cave_receipt_unknown_calls). -1 when out is full. */
int cave_bill_format(jv receipt, unsigned long unknown_calls, struct cave_buf *out);

#endif
