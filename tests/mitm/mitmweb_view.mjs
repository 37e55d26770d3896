// Drives mitmweb in headless Chromium for tests/mitm/test_mitmweb_browser.py (issue 35, item 2).
// node mitmweb_view.mjs <playwright-core dir> <chromium> <mitmweb url with token> <path substring> <screenshot>
// Selects the first flow whose path contains <path substring>, opens its Response tab, waits until the
// Dragoman view has rendered, saves a screenshot, then opens the Request tab and waits for the view there;
// prints {"response": <the Response tab's text>, "request": <the Request tab's text>} as JSON.
import { createRequire } from "node:module";

const [pwDir, chromium, url, pathPart, shot] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { chromium: driver } = require(pwDir);

const browser = await driver.launch({
  executablePath: chromium,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1800, height: 900 } });
  page.setDefaultTimeout(15000);
  await page.goto(url);
  const row = page.locator(".flow-table tbody tr", { hasText: pathPart }).first();
  await row.click();
  const tab = (name) => page.locator(".flow-detail nav.nav-tabs a", { hasText: name }).first();
  await tab(/^Response$/).click();
  const answer = page.locator(".flow-detail", { hasText: "the answer on both sides" });
  await answer.getByText("lossiness report").first().waitFor();
  await page.screenshot({ path: shot, fullPage: false });
  const response = await answer.innerText();
  await tab(/^Request$/).click();
  const sent = page.locator(".flow-detail", { hasText: "request as sent upstream" });
  await sent.getByText("lossiness report").first().waitFor();
  console.log(JSON.stringify({ response, request: await sent.innerText() }));
} finally {
  await browser.close();
}
