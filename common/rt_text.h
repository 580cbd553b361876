/* Character rules that several text formats share: the $filter parser
 * (binary literals X'..', GUIDs), URL percent-decoding and the OData GUID
 * parser all read hexadecimal digits the same way.
 *
 * Thread: pure functions. */
#ifndef RT_TEXT_H
#define RT_TEXT_H

/* The value (0..15) of the hexadecimal digit @c (0-9, a-f, A-F), or -1
 * when @c is not one. Any char value is accepted, negative ones included. */
int rt_hexval(int c);

#endif
