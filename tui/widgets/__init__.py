"""The Lens's own widgets, one a file: the scrubber (a mark per call) and the item list
(the slots, the response, search results)."""
