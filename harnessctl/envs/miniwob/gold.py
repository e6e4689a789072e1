"""Scripted solutions of the suite's MiniWoB++ tasks: the next action, read from the page.

A MiniWoB++ task draws its problem when the episode starts, so its gold cannot be written
down beforehand: each solver here reads the utterance and the page the harness showed (the
text of :mod:`.dom`, parsed back) and the actions already taken, and answers the next action
in the text protocol (``click [5]``, ``type [5] "text"``, ``press <Enter>``), or None when it
does not know one. They are the ``replay/miniwob`` and ``sim/miniwob`` test doubles' skill,
written from each task page's own rules (its utterance and its reward function). Standard
library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .dom import Element, parse_page

_QUOTED = re.compile(r'"([^"]*)"')


@dataclass
class Page:
    """What a solver reads: the utterance, the elements and the actions taken so far."""

    utterance: str
    elements: list[Element]
    history: Sequence[str]

    def quoted(self) -> list[str]:
        return _QUOTED.findall(self.utterance)

    def find(self, predicate: Callable[[Element], bool]) -> Element | None:
        return next((e for e in self.elements if predicate(e)), None)

    def all(self, predicate: Callable[[Element], bool]) -> list[Element]:
        return [e for e in self.elements if predicate(e)]

    def text(self, text: str, tag: str | None = None) -> Element | None:
        return self.find(lambda e: e.text == text and (tag is None or e.tag == tag))

    def has(self, cls: str) -> Callable[[Element], bool]:
        return lambda e: cls in e.classes

    def done(self, action: str) -> bool:
        return action in self.history


def click(element: Element | None) -> str | None:
    return f"click [{element.ref}]" if element is not None else None


def type_into(element: Element | None, text: str) -> str | None:
    if element is None:
        return None
    return f"type [{element.ref}] {json.dumps(text, ensure_ascii=False)}"


def first_new(page: Page, actions: Sequence[str | None]) -> str | None:
    """The first of ``actions`` not taken yet (a fixed sequence of steps)."""
    for action in actions:
        if action is None:
            return None
        if not page.done(action):
            return action
    return None


def submit(page: Page) -> Element | None:
    return page.find(
        lambda e: e.tag == "button" and e.text.lower() in ("submit", "ok", "login", "go!", "search")
    ) or page.find(lambda e: e.id == "subbtn")


# --- click -------------------------------------------------------------------------------
def click_button(page: Page) -> str | None:
    (label,) = page.quoted()[:1] or [""]
    return click(page.text(label, "button"))


def click_sequence(page: Page) -> str | None:
    return first_new(page, [click(page.text("ONE", "button")), click(page.text("TWO", "button"))])


def click_test(page: Page) -> str | None:
    return click(page.find(lambda e: e.tag == "button"))


def click_one(page: Page) -> str | None:
    word = page.utterance.split("button ")[-1].rstrip(".").strip()
    return click(page.text(word, "button"))


def _box(page: Page, label: str) -> Element | None:
    holder = page.find(lambda e: e.tag == "label" and e.all_text().strip() == label)
    if holder is None:
        return None
    return next((c for c in holder.children if c.tag.startswith("input")), None)


def click_checkboxes(page: Page) -> str | None:
    match = re.search(r"Select (.*) and click Submit", page.utterance)
    wanted = [] if match is None or match.group(1) == "nothing" else match.group(1).split(", ")
    steps = [click(_box(page, label)) for label in wanted]
    return first_new(page, [*steps, click(submit(page))])


def click_link(page: Page) -> str | None:
    (label,) = page.quoted()[:1] or [""]
    return click(page.find(lambda e: "alink" in e.classes and e.text == label))


def click_dialog(page: Page) -> str | None:
    return click(page.find(page.has("ui-dialog-titlebar-close")))


def click_dialog_2(page: Page) -> str | None:
    (label,) = page.quoted()[:1] or [""]
    if label.lower() in ("x", "close"):
        return click_dialog(page)
    return click(page.find(lambda e: e.tag == "button" and e.text == label))


def click_tab(page: Page) -> str | None:
    match = re.search(r"Tab #(\d+)", page.utterance)
    return click(page.text(f"Tab #{match.group(1)}", "a") if match else None)


def click_tab_2(page: Page) -> str | None:
    """Switch tabs until the link shows, then click it."""
    link = click_link(page)
    if link is not None:
        return link
    tabs = page.all(lambda e: e.tag == "a" and "ui-tabs-anchor" in e.classes)
    return next((click(t) for t in tabs if not page.done(f"click [{t.ref}]")), None)


def click_widget(page: Page) -> str | None:
    (kind,) = page.quoted()[:1] or [""]
    tags = {"checkbox": "input[checkbox]", "radio": "input[radio]", "text": "input[text]",
            "textarea": "textarea", "button": "button"}  # fmt: skip
    return click(page.find(lambda e: e.tag == tags.get(kind, kind)))


def click_option(page: Page) -> str | None:
    match = re.search(r"Select (.*) and click Submit", page.utterance)
    label = match.group(1) if match else ""
    return first_new(page, [click(_box(page, label)), click(submit(page))])


# --- type --------------------------------------------------------------------------------
def enter_text(page: Page) -> str | None:
    (word,) = page.quoted()[:1] or [""]
    if "lower case" in page.utterance:
        word = word.lower()
    elif "upper case" in page.utterance:
        word = word.upper()
    field = page.find(lambda e: e.tag.startswith("input"))
    return first_new(page, [type_into(field, word), click(submit(page))])


def enter_password(page: Page) -> str | None:
    (word,) = page.quoted()[:1] or [""]
    fields = page.all(lambda e: e.tag == "input[password]")
    return first_new(page, [*(type_into(f, word) for f in fields), click(submit(page))])


def focus_text(page: Page) -> str | None:
    fields = page.all(lambda e: e.tag == "input[text]")
    match = re.search(r"(\d+)(?:st|nd|rd|th)", page.utterance)
    index = int(match.group(1)) - 1 if match else 0
    return click(fields[index] if index < len(fields) else None)


def enter_date(page: Page) -> str | None:
    match = re.search(r"(\d\d)/(\d\d)/(\d{4})", page.utterance)
    if match is None:
        return None
    month, day, year = match.groups()
    field = page.find(lambda e: e.tag == "input[date]")
    return first_new(page, [type_into(field, month + day + year), click(submit(page))])


def enter_time(page: Page) -> str | None:
    match = re.search(r"(\d{1,2}):(\d\d) ?([AP]M)", page.utterance)
    if match is None:
        return None
    hour, minute, half = match.groups()
    field = page.find(lambda e: e.tag == "input[time]")
    return first_new(
        page, [type_into(field, f"{int(hour):02d}{minute}{half[0]}"), click(submit(page))]
    )


# --- form --------------------------------------------------------------------------------
def login_user(page: Page) -> str | None:
    """Each field until it holds its value (login-user-popup's popup, closed with Cancel,
    may swallow what was typed while it showed), then the button."""
    popup = page.find(lambda e: e.id == "popup-cancel")
    if popup is not None:
        return click(popup)
    user, password = (page.quoted() + ["", ""])[:2]
    for key, value in (("username", user), ("password", password)):
        field = next((e for e in page.elements if e.id == key), None)
        if field is not None and field.value != value:
            return type_into(field, value)
    return click(page.find(lambda e: e.id == "subbtn"))


def _movie_query(page: Page) -> dict[str, str]:
    match = re.search(r"Search for (\S+) movies directed by (.+?) from year (\d+)", page.utterance)
    if match is None:
        return {}
    genre, director, year = match.groups()
    return {"genre": genre, "director": director, "year": year, "date": year}


def multi_form(page: Page) -> str | None:
    """multi-layouts, multi-orderings: each field by its label, then the submit control."""
    query = _movie_query(page)
    steps: list[str | None] = []
    for field in page.all(lambda e: e.tag == "input[text]"):
        label = _label_of(page, field).lower()
        key = next((k for k in query if k in label), None)
        if key is not None:
            steps.append(type_into(field, query[key]))
    last = page.find(
        lambda e: (
            e.tag == "button"
            or bool({"final", "ui-submit"} & set(e.classes))
            or (not e.children and e.text in ("Submit", "Search", "Go!"))
        )
    )
    return first_new(page, [*steps, click(last)])


def _label_of(page: Page, field: Element) -> str:
    """The text of ``field``'s label: a sibling's text, else the nearest text before it."""
    siblings = field.parent.children if field.parent is not None else []
    texts = [e.all_text() for e in siblings if e is not field and not e.tag.startswith("input")]
    if len(siblings) > 1 and any(texts):
        return " ".join(t for t in texts if t)
    index = page.elements.index(field)
    for element in reversed(page.elements[:index]):
        if element.text and not element.tag.startswith("input"):
            return element.text
    return ""


def form_sequence_2(page: Page) -> str | None:
    match = re.search(
        r"Check the (\d+)\w\w radio button and enter the number \"(\d+)\" "
        r"into the (\d+)\w\w textbox",
        page.utterance,
    )
    if match is None:
        return None
    radio, number, box = int(match.group(1)), match.group(2), int(match.group(3))
    radios = page.all(lambda e: e.tag == "input[radio]")
    boxes = page.all(lambda e: e.tag == "input[text]")
    return first_new(page, [
        click(radios[radio - 1] if radio <= len(radios) else None),
        type_into(boxes[box - 1] if box <= len(boxes) else None, number),
        click(submit(page)),
    ])  # fmt: skip


def use_spinner(page: Page) -> str | None:
    """The page blocks typing into the spinner: its arrow keys step it, one a press."""
    match = re.search(r"Select (-?\d+) with the spinner", page.utterance)
    field = page.find(lambda e: e.id == "spinner")
    if match is None or field is None:
        return None
    if not page.done(f"click [{field.ref}]"):
        return click(field)
    target = int(match.group(1))
    key = "press <ArrowUp>" if target > 0 else "press <ArrowDown>"
    if page.history.count(key) < abs(target):
        return key
    return click(submit(page))


def choose_list(page: Page) -> str | None:
    match = re.search(r"Select (.+) from the list", page.utterance)
    select = page.find(lambda e: e.tag == "select")
    if match is None:
        return None
    return first_new(page, [type_into(select, match.group(1)), click(submit(page))])


# --- navigation --------------------------------------------------------------------------
def navigate_tree(page: Page) -> str | None:
    (name,) = page.quoted()[:1] or [""]
    target = page.find(lambda e: e.tag == "span" and e.text == name)
    if target is not None:
        return click(target)
    folders = page.all(lambda e: "folder" in e.classes)
    return next((click(f) for f in folders if not page.done(f"click [{f.ref}]")), None)


def click_collapsible(page: Page) -> str | None:
    return first_new(page, [click(page.find(lambda e: e.tag == "h3")), click(submit(page))])


def click_collapsible_2(page: Page) -> str | None:
    link = click_link(page)
    if link is not None:
        return link
    headers = page.all(lambda e: e.tag == "h3")
    return next((click(h) for h in headers if not page.done(f"click [{h.ref}]")), None)


def click_menu_2(page: Page) -> str | None:
    """Open the menu, then each item that holds a submenu (jQuery UI's menu opens one on a
    click of its item, not only on hover) until the labelled item shows, then click it."""
    (label,) = page.quoted()[1:2] or [""]
    item = page.find(lambda e: e.tag == "li" and e.all_text().strip() == label)
    if item is not None:
        return click(item)
    if page.find(lambda e: e.id == "menu") is None:
        return click(page.find(lambda e: e.id == "open-menu"))
    holders = page.all(
        lambda e: (
            e.tag == "li"
            and "ui-state-disabled" not in e.classes
            and _within(e, "ui-menu-icon") is not None
        )
    )
    return next((click(h) for h in holders if not page.done(f"click [{h.ref}]")), None)


def _thread_of(page: Page, sender: str) -> Element | None:
    name = page.find(lambda e: "email-sender" in e.classes and e.text == sender)
    while name is not None and "email-thread" not in name.classes:
        name = name.parent
    return name


def _within(root: Element | None, cls: str) -> Element | None:
    if root is None:
        return None
    stack = [root]
    while stack:
        element = stack.pop(0)
        if cls in element.classes:
            return element
        stack.extend(element.children)
    return None


def email_delete(page: Page) -> str | None:
    match = re.search(r"email by (.+?) and click the trash", page.utterance)
    return click(_within(_thread_of(page, match.group(1)), "trash") if match else None)


def email_star(page: Page) -> str | None:
    match = re.search(r"email by (.+?) and click the star", page.utterance)
    return click(_within(_thread_of(page, match.group(1)), "star") if match else None)


def _post_of(page: Page, user: str) -> list[Element]:
    posts = []
    for name in page.all(lambda e: "username" in e.classes and e.text == user):
        post: Element | None = name
        while post is not None and "media" not in post.classes:
            post = post.parent
        if post is not None:
            posts.append(post)
    return posts


def social_media(page: Page) -> str | None:
    match = re.search(r'For the user (@\S+), click on the "(.+?)" button', page.utterance)
    if match is None:
        return None
    user, button = match.groups()
    posts = _post_of(page, user)
    if not posts:
        return None
    target = page.find(
        lambda e: (e.text == button or e.text.startswith(button + " ")) and _inside(e, posts[0])
    )
    if target is not None:
        return click(target)
    cls = button.lower()
    direct = _within(posts[0], cls)
    if direct is not None and cls in ("reply", "retweet", "like", "share"):
        return click(direct)
    return click(_within(posts[0], "more"))


def _inside(element: Element, root: Element) -> bool:
    node: Element | None = element
    while node is not None:
        if node is root:
            return True
        node = node.parent
    return False


def social_media_some(page: Page) -> str | None:
    match = re.search(
        r'Click the "(.+?)" button on (\d+) posts? by (@\S+) and then click Submit', page.utterance
    )
    if match is None:
        return None
    button, count, user = match.group(1).lower(), int(match.group(2)), match.group(3)
    steps = [click(_within(post, button)) for post in _post_of(page, user)[:count]]
    return first_new(
        page, [*steps, click(page.find(lambda e: e.tag == "button" and e.text == "Submit"))]
    )


# --- search ------------------------------------------------------------------------------
def search_engine(page: Page) -> str | None:
    match = re.search(
        r'enter "(.+?)" and press "Search", then find and click the (\d+)\w\w search result',
        page.utterance,
    )
    if match is None:
        return None
    word, rank = match.group(1), int(match.group(2))
    box = page.find(lambda e: e.id == "search-text")
    typed = type_into(box, word)
    if typed is not None and not page.done(typed):
        return typed
    go = click(page.find(lambda e: e.id == "search"))
    if go is not None and not page.done(go):
        return go
    links = page.all(
        lambda e: (
            e.tag == "a"
            and "search-title" in " ".join(e.classes)
            or (e.tag == "a" and e.parent is not None and "search-title" in e.parent.classes)
        )
    )
    current = page.find(lambda e: e.tag == "li" and "active" in e.classes)
    page_no = (
        int(current.all_text())
        if current is not None and current.all_text().strip().isdigit()
        else 1
    )
    index = rank - 1 - (page_no - 1) * 3
    if 0 <= index < len(links):
        return click(links[index])
    target = str((rank - 1) // 3 + 1)
    return click(page.find(lambda e: e.tag == "a" and e.text == target))


def use_autocomplete(page: Page) -> str | None:
    match = re.search(r'starts with "(.+?)"(?: and ends with "(.+?)")?', page.utterance)
    if match is None:
        return None
    start, end = match.group(1), match.group(2) or ""
    box = page.find(lambda e: e.id == "tags")
    typed = type_into(box, start)
    if typed is not None and not page.done(typed):
        return typed
    item = page.find(
        lambda e: (
            "ui-menu-item-wrapper" in e.classes
            and e.text.startswith(start)
            and e.text.endswith(end)
        )
    )
    if item is not None:
        return click(item)
    return click(submit(page))


def find_word(page: Page) -> str | None:
    match = re.search(r"Find the (\d+)\w\w word in the paragraph", page.utterance)
    paragraph = page.find(lambda e: e.tag == "p")
    if match is None or paragraph is None:
        return None
    words = paragraph.all_text().split()
    index = int(match.group(1)) - 1
    word = words[index].strip(".,;:!?") if index < len(words) else ""
    box = page.find(lambda e: e.id == "answer-input")
    return first_new(page, [type_into(box, word), click(submit(page))])


def read_table(page: Page) -> str | None:
    match = re.search(r"Enter the value of (.+?) into the text field", page.utterance)
    if match is None:
        return None
    key = page.find(lambda e: e.tag == "td" and e.text == match.group(1))
    row = key.parent if key is not None else None
    cells = [c for c in row.children if c.tag == "td"] if row is not None else []
    value = cells[1].text if len(cells) > 1 else ""
    box = page.find(lambda e: e.tag == "input[text]")
    return first_new(page, [type_into(box, value), click(submit(page))])


def phone_book(page: Page) -> str | None:
    match = re.search(r"Find (.+?) in the contact book and click on their (\w+)", page.utterance)
    if match is None:
        return None
    name, what = match.groups()
    card = page.find(lambda e: "name" in e.classes and e.text == name)
    if card is not None and card.parent is not None:
        return click(_within(card.parent, what.lower()))
    return click(page.find(lambda e: e.tag == "a" and e.text == ">"))


SOLVERS: dict[str, Callable[[Page], str | None]] = {
    "click-button": click_button,
    "click-button-sequence": click_sequence,
    "click-checkboxes": click_checkboxes,
    "click-checkboxes-large": click_checkboxes,
    "click-checkboxes-transfer": click_checkboxes,
    "click-dialog": click_dialog,
    "click-dialog-2": click_dialog_2,
    "click-link": click_link,
    "click-option": click_option,
    "click-tab": click_tab,
    "click-test": click_test,
    "click-test-2": click_one,
    "click-test-transfer": click_one,
    "click-widget": click_widget,
    "unicode-test": click_button,
    "enter-text": enter_text,
    "enter-text-2": enter_text,
    "enter-text-dynamic": enter_text,
    "enter-password": enter_password,
    "enter-date": enter_date,
    "enter-time": enter_time,
    "focus-text": focus_text,
    "focus-text-2": focus_text,
    "login-user": login_user,
    "login-user-popup": login_user,
    "multi-layouts": multi_form,
    "multi-orderings": multi_form,
    "form-sequence-2": form_sequence_2,
    "use-spinner": use_spinner,
    "choose-list": choose_list,
    "navigate-tree": navigate_tree,
    "click-tab-2": click_tab_2,
    "click-tab-2-easy": click_tab_2,
    "click-tab-2-medium": click_tab_2,
    "click-collapsible-nodelay": click_collapsible,
    "click-collapsible-2-nodelay": click_collapsible_2,
    "click-menu-2": click_menu_2,
    "email-inbox-delete": email_delete,
    "social-media": social_media,
    "social-media-some": social_media_some,
    "search-engine": search_engine,
    "use-autocomplete-nodelay": use_autocomplete,
    "find-word": find_word,
    "read-table": read_table,
    "phone-book": phone_book,
}


def split_observation(text: str) -> tuple[str, str] | None:
    """(utterance, page text) of an observation as the environment writes it, or None."""
    match = re.search(r"^Task: (.*)$", text, re.M)
    if match is None:
        return None
    rest = text[match.end() :]
    page = rest.split("Page:\n", 1)[1] if "Page:\n" in rest else rest
    return match.group(1).strip(), page


def solve(task: str, observation: str, history: Sequence[str]) -> str | None:
    """The next action for ``task`` given the latest observation and the actions taken."""
    solver = SOLVERS.get(task)
    parts = split_observation(observation)
    if solver is None or parts is None:
        return None
    utterance, page_text = parts
    return solver(Page(utterance, parse_page(page_text), list(history)))


__all__ = ["SOLVERS", "Page", "solve", "split_observation"]
